// Command argocd-lua runs an Argo CD resource health check script the way Argo CD v3 runs one
// (github.com/argoproj/argo-cd/v3 util/lua: VM.runLua and VM.ExecuteHealthLua), so the tests of
// this repository can check a health.lua without an Argo CD.
//
//	argocd-lua [-open-libs] SCRIPT [OBJECT.json]
//
// The object (JSON, from the file or else stdin) becomes the global `obj`; the table the script
// returns is printed as {"status": "...", "message": "..."}, or null when the script returns nil
// (Argo CD then takes no health from Lua). A script error, the 1 s timeout or a result that is
// not a table exits 1 with the error on stderr.
//
// Libraries, as in Argo CD: a customization from argocd-cm gets package, base, table and the
// 'safe' os (time and date) unless `resource.customizations.useOpenLibs.<group_kind>` is true;
// built-in scripts and useOpenLibs customizations get every gopher-lua library (-open-libs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
)

const (
	incorrectReturnType = "expect %s output from Lua script, not %s"
	invalidHealthStatus = "Lua returned an invalid health status"
)

// healthStatus is gitops-engine's health.HealthStatus.
type healthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// The codes isValidHealthStatusCode accepts.
var validHealthStatus = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func main() {
	openLibs := flag.Bool("open-libs", false,
		"open every gopher-lua library, as for built-in scripts and useOpenLibs customizations")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: argocd-lua [-open-libs] SCRIPT [OBJECT.json]  (the object on stdin without a file)")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 || flag.NArg() > 2 {
		flag.Usage()
		os.Exit(2)
	}
	script, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	var data []byte
	if flag.NArg() == 2 {
		data, err = os.ReadFile(flag.Arg(1))
	} else {
		data, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		fail(err)
	}
	// An unstructured.Unstructured's Object: a JSON object, numbers as float64.
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		fail(fmt.Errorf("the object is not a JSON object: %w", err))
	}
	health, err := executeHealthLua(obj, string(script), *openLibs)
	if err != nil {
		fail(err)
	}
	if health == nil {
		fmt.Println("null")
		return
	}
	status, _ := json.Marshal(health.Status)
	message, _ := json.Marshal(health.Message)
	fmt.Printf("{\"status\": %s, \"message\": %s}\n", status, message)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// runLua is VM.runLuaWithResourceActionParameters without action parameters.
func runLua(l *lua.LState, obj map[string]any, script string) error {
	// Opens table library to allow access to functions to manipulate tables
	for _, pair := range []struct {
		n string
		f lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		// load our 'safe' version of the OS library
		{lua.OsLibName, OpenSafeOs},
	} {
		if err := l.CallByParam(lua.P{
			Fn:      l.NewFunction(pair.f),
			NRet:    0,
			Protect: true,
		}, lua.LString(pair.n)); err != nil {
			panic(err)
		}
	}
	// preload our 'safe' version of the OS library. Allows the 'local os = require("os")' to work
	l.PreloadModule(lua.OsLibName, SafeOsLoader)

	ctx, cancel := context.WithTimeout(context.Background(), 1*time.Second)
	defer cancel()
	l.SetContext(ctx)

	// Health checks get an empty actionParams table.
	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", decodeValue(l, obj))

	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}

	// Remove the default lua stack trace from execution errors since these
	// errors will make it back to the user
	var apiErr *lua.ApiError
	if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
		apiErr.StackTrace = ""
		err = apiErr
	}
	return err
}

// executeHealthLua is VM.ExecuteHealthLua.
func executeHealthLua(obj map[string]any, script string, openLibs bool) (*healthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	if err := runLua(l, obj, script); err != nil {
		return nil, err
	}
	returnValue := l.Get(-1)
	if returnValue.Type() == lua.LTTable {
		jsonBytes, err := luajson.Encode(returnValue)
		if err != nil {
			return nil, err
		}
		health := &healthStatus{}
		err = json.Unmarshal(jsonBytes, health)
		if err != nil {
			// Validate if the error is caused by an empty object
			typeError := &json.UnmarshalTypeError{Value: "array", Type: reflect.TypeFor[*healthStatus]()}
			if errors.As(err, &typeError) {
				return &healthStatus{}, nil
			}
			return nil, err
		}
		if !validHealthStatus[health.Status] {
			return &healthStatus{Status: "Unknown", Message: invalidHealthStatus}, nil
		}
		return health, nil
	} else if returnValue.Type() == lua.LTNil {
		return nil, nil
	}
	return nil, fmt.Errorf(incorrectReturnType, "table", returnValue.Type().String())
}

// decodeValue is util/lua's decodeValue: how Argo CD turns the object into the Lua table `obj`.
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch converted := value.(type) {
	case bool:
		return lua.LBool(converted)
	case float64:
		return lua.LNumber(converted)
	case string:
		return lua.LString(converted)
	case json.Number:
		return lua.LString(converted)
	case int:
		return lua.LNumber(converted)
	case int32:
		return lua.LNumber(converted)
	case int64:
		return lua.LNumber(converted)
	case []any:
		arr := l.CreateTable(len(converted), 0)
		for _, item := range converted {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(converted))
		for key, item := range converted {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	case nil:
		return lua.LNil
	}

	return lua.LNil
}
