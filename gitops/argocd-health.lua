-- Argo CD health check for bundle-operator.dev Bundle, BundleInstallation and Endpoint.
-- Reads the kstatus-style status the operator writes: observedGeneration, Ready, Reconciling,
-- Stalled. Register it for each kind in argocd-cm (docs/how-to/gitops.md shows how).
local hs = {}

local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function said(c, fallback)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.message
  end
  return fallback
end

local annotations = (obj.metadata and obj.metadata.annotations) or {}
local spec = obj.spec or {}
if annotations["bundle-operator.dev/paused"] == "true" then
  hs.status = "Suspended"
  hs.message = "paused by the bundle-operator.dev/paused annotation; nothing is written"
  return hs
end
if spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "spec.suspend is true; nothing is written"
  return hs
end
if obj.kind == "Endpoint" and spec.enabled == false then
  hs.status = "Suspended"
  hs.message = "spec.enabled is false; the endpoint refuses clients"
  return hs
end

local generation = obj.metadata and obj.metadata.generation
if obj.status == nil or obj.status.observedGeneration == nil
    or (generation ~= nil and obj.status.observedGeneration < generation) then
  hs.status = "Progressing"
  hs.message = "waiting for the operator to observe the latest spec"
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "False" and ready.reason == "AwaitingApproval" then
  hs.status = "Suspended"
  hs.message = said(ready, "a plan waits for approval in status.plan; nothing is written")
  return hs
end

local stalled = condition("Stalled")
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = said(stalled, "stalled: it cannot proceed without a change")
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = said(ready, "ready")
  return hs
end

local reconciling = condition("Reconciling")
hs.status = "Progressing"
hs.message = said(reconciling, said(ready, "waiting for the operator"))
return hs
