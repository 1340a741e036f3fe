"""Typed payloads of the platform API v1, shared by the client and the reference platform.

One set of pydantic models describes every request and response body: the client builds
requests from them, the reference platform validates requests with them, and the OpenAPI
document is generated from them, so the three cannot drift apart. ``extra="forbid"`` throughout:
an unknown field is refused with its path, and a response never carries an undeclared field.

The models live in one module per part of the API; this package names them all, so callers
import ``bundle_operator.platform.models`` and need not know which module holds which.
"""

from bundle_operator.platform.models.agents import Agent as Agent
from bundle_operator.platform.models.agents import AgentCreate as AgentCreate
from bundle_operator.platform.models.agents import AgentUpdate as AgentUpdate
from bundle_operator.platform.models.agents import Channel as Channel
from bundle_operator.platform.models.agents import ChannelCreate as ChannelCreate
from bundle_operator.platform.models.agents import ChannelUpdate as ChannelUpdate
from bundle_operator.platform.models.agents import Policy as Policy
from bundle_operator.platform.models.agents import PolicyCreate as PolicyCreate
from bundle_operator.platform.models.agents import PolicyType as PolicyType
from bundle_operator.platform.models.agents import PolicyUpdate as PolicyUpdate
from bundle_operator.platform.models.agents import Skill as Skill
from bundle_operator.platform.models.agents import SkillCreate as SkillCreate
from bundle_operator.platform.models.agents import SkillUpdate as SkillUpdate
from bundle_operator.platform.models.agents import Timezone as Timezone
from bundle_operator.platform.models.agents import Trigger as Trigger
from bundle_operator.platform.models.agents import TriggerCreate as TriggerCreate
from bundle_operator.platform.models.agents import TriggerUpdate as TriggerUpdate
from bundle_operator.platform.models.api import Fault as Fault
from bundle_operator.platform.models.api import FaultSpec as FaultSpec
from bundle_operator.platform.models.api import FieldError as FieldError
from bundle_operator.platform.models.api import Health as Health
from bundle_operator.platform.models.api import Page as Page
from bundle_operator.platform.models.api import Problem as Problem
from bundle_operator.platform.models.api import Secret as Secret
from bundle_operator.platform.models.api import SecretCreate as SecretCreate
from bundle_operator.platform.models.api import SecretUpdate as SecretUpdate
from bundle_operator.platform.models.base import ID_PATTERN as ID_PATTERN
from bundle_operator.platform.models.base import ApiModel as ApiModel
from bundle_operator.platform.models.base import Entity as Entity
from bundle_operator.platform.models.base import EntityId as EntityId
from bundle_operator.platform.models.base import IssuedSecret as IssuedSecret
from bundle_operator.platform.models.base import Name as Name
from bundle_operator.platform.models.base import Schedule as Schedule
from bundle_operator.platform.models.base import SecretRef as SecretRef
from bundle_operator.platform.models.base import Slug as Slug
from bundle_operator.platform.models.base import Text as Text
from bundle_operator.platform.models.base import Url as Url
from bundle_operator.platform.models.base import UrlName as UrlName
from bundle_operator.platform.models.base import Value as Value
from bundle_operator.platform.models.endpoints import ApiKeyIssued as ApiKeyIssued
from bundle_operator.platform.models.endpoints import Endpoint as Endpoint
from bundle_operator.platform.models.endpoints import EndpointCreate as EndpointCreate
from bundle_operator.platform.models.endpoints import EndpointOAuth as EndpointOAuth
from bundle_operator.platform.models.endpoints import EndpointRateLimit as EndpointRateLimit
from bundle_operator.platform.models.endpoints import EndpointUpdate as EndpointUpdate
from bundle_operator.platform.models.endpoints import GatewayAuditEntry as GatewayAuditEntry
from bundle_operator.platform.models.endpoints import IdempotencyRecord as IdempotencyRecord
from bundle_operator.platform.models.gateway import GatewayBundle as GatewayBundle
from bundle_operator.platform.models.gateway import GatewayBundleCreate as GatewayBundleCreate
from bundle_operator.platform.models.gateway import GatewayBundleUpdate as GatewayBundleUpdate
from bundle_operator.platform.models.gateway import GatewayEntryCuration as GatewayEntryCuration
from bundle_operator.platform.models.gateway import GatewayMember as GatewayMember
from bundle_operator.platform.models.gateway import GatewayMemberOrder as GatewayMemberOrder
from bundle_operator.platform.models.gateway import GatewayMemberPrompt as GatewayMemberPrompt
from bundle_operator.platform.models.gateway import GatewayMemberPut as GatewayMemberPut
from bundle_operator.platform.models.gateway import GatewayMemberResource as GatewayMemberResource
from bundle_operator.platform.models.gateway import GatewayPrompt as GatewayPrompt
from bundle_operator.platform.models.gateway import GatewayPromptPut as GatewayPromptPut
from bundle_operator.platform.models.gateway import GatewayRename as GatewayRename
from bundle_operator.platform.models.gateway import GatewayResource as GatewayResource
from bundle_operator.platform.models.gateway import GatewayResourcePut as GatewayResourcePut
from bundle_operator.platform.models.gateway import GatewayTool as GatewayTool
from bundle_operator.platform.models.gateway import GatewayToolCuration as GatewayToolCuration
from bundle_operator.platform.models.gateway import PromptArgument as PromptArgument
from bundle_operator.platform.models.gateway import PromptMessage as PromptMessage
from bundle_operator.platform.models.gateway import ResourceMimeType as ResourceMimeType
from bundle_operator.platform.models.gateway import member_resource_id as member_resource_id
from bundle_operator.platform.models.gateway import parse_member_resource_id as parse_member_resource_id
from bundle_operator.platform.models.knowledge import App as App
from bundle_operator.platform.models.knowledge import AppCreate as AppCreate
from bundle_operator.platform.models.knowledge import AppDocument as AppDocument
from bundle_operator.platform.models.knowledge import AppUpdate as AppUpdate
from bundle_operator.platform.models.knowledge import AppVersion as AppVersion
from bundle_operator.platform.models.knowledge import AppVersionCreate as AppVersionCreate
from bundle_operator.platform.models.knowledge import AppVersionUpdate as AppVersionUpdate
from bundle_operator.platform.models.knowledge import CredentialName as CredentialName
from bundle_operator.platform.models.knowledge import CredentialValue as CredentialValue
from bundle_operator.platform.models.knowledge import KnowledgeSet as KnowledgeSet
from bundle_operator.platform.models.knowledge import KnowledgeSetCreate as KnowledgeSetCreate
from bundle_operator.platform.models.knowledge import KnowledgeSetUpdate as KnowledgeSetUpdate
from bundle_operator.platform.models.knowledge import KnowledgeSource as KnowledgeSource
from bundle_operator.platform.models.knowledge import KnowledgeSourcePut as KnowledgeSourcePut
from bundle_operator.platform.models.knowledge import SourceEntry as SourceEntry
from bundle_operator.platform.models.knowledge import SourceList as SourceList
from bundle_operator.platform.models.knowledge import SourceText as SourceText
from bundle_operator.platform.models.mcp import Catalog as Catalog
from bundle_operator.platform.models.mcp import CatalogPrompt as CatalogPrompt
from bundle_operator.platform.models.mcp import CatalogPromptArgument as CatalogPromptArgument
from bundle_operator.platform.models.mcp import CatalogResource as CatalogResource
from bundle_operator.platform.models.mcp import CatalogTool as CatalogTool
from bundle_operator.platform.models.mcp import FieldType as FieldType
from bundle_operator.platform.models.mcp import HealthState as HealthState
from bundle_operator.platform.models.mcp import InstanceHealth as InstanceHealth
from bundle_operator.platform.models.mcp import McpInstance as McpInstance
from bundle_operator.platform.models.mcp import McpInstanceCreate as McpInstanceCreate
from bundle_operator.platform.models.mcp import McpInstanceUpdate as McpInstanceUpdate
from bundle_operator.platform.models.mcp import McpServer as McpServer
from bundle_operator.platform.models.mcp import McpServerCreate as McpServerCreate
from bundle_operator.platform.models.mcp import McpServerUpdate as McpServerUpdate
from bundle_operator.platform.models.mcp import SchemaField as SchemaField
from bundle_operator.platform.models.mcp import SchemaFieldIn as SchemaFieldIn
from bundle_operator.platform.models.mcp import ServerType as ServerType
