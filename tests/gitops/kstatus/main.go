// Command kstatus prints the kstatus verdict on one Kubernetes object, as Flux, kpt and the
// cli-utils applier compute it (sigs.k8s.io/cli-utils pkg/kstatus/status.Compute).
//
//	kstatus [OBJECT.json]
//
// The object is JSON, from the file or else stdin. Prints
// {"status": "Current|InProgress|Failed|Terminating|NotFound|Unknown", "message": "...",
// "conditions": [...]}, the conditions being the kstatus ones Compute derives (Reconciling,
// Stalled) as the status.Augment would add them. A Compute error exits 1 with it on stderr.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

type verdict struct {
	Status     string      `json:"status"`
	Message    string      `json:"message"`
	Conditions []condition `json:"conditions"`
}

func main() {
	if len(os.Args) > 2 {
		fmt.Fprintln(os.Stderr, "usage: kstatus [OBJECT.json]  (the object on stdin without a file)")
		os.Exit(2)
	}
	var data []byte
	var err error
	if len(os.Args) == 2 {
		data, err = os.ReadFile(os.Args[1])
	} else {
		data, err = io.ReadAll(os.Stdin)
	}
	if err != nil {
		fail(err)
	}
	// As the API machinery decodes an object: whole numbers become int64, which kstatus expects.
	var object map[string]any
	if err := utiljson.Unmarshal(data, &object); err != nil {
		fail(fmt.Errorf("the object is not JSON: %w", err))
	}
	if object == nil {
		fail(fmt.Errorf("the object is not a JSON object"))
	}
	result, err := status.Compute(&unstructured.Unstructured{Object: object})
	if err != nil {
		fail(err)
	}
	out := verdict{Status: string(result.Status), Message: result.Message, Conditions: []condition{}}
	for _, c := range result.Conditions {
		out.Conditions = append(out.Conditions, condition{
			Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: c.Message,
		})
	}
	encoded, err := json.Marshal(out)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(encoded))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
