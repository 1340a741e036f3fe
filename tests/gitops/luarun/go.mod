// argocd-lua: runs an Argo CD resource health check script as Argo CD v3 does (util/lua).
module bundle-operator.dev/gitops/luarun

go 1.26.0

require (
	// The interpreter and JSON bridge at the versions argo-cd v3.6.1's go.mod requires.
	github.com/yuin/gopher-lua v1.1.2
	layeh.com/gopher-json v0.0.0-20190114024228-97fed8db8427
)
