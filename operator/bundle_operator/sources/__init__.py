"""Resolving a Bundle's source into a bundle document, with no Kubernetes in it.

``models`` (the source's spec and status fields), ``resolution`` (what resolving gives and how it
fails), ``downloads`` (guarded downloads and their refusals), ``archives`` (``.mcpb`` archives and
signature policies), ``registry_source`` (a registry record, read twice around the download).
"""
