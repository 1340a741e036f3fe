"""Reading .mcpb archives (formerly .dxt): rules, signatures, contained extraction, conversion.

``inspect_file`` reads and verifies without writing anything; ``extract_file`` unpacks an accepted
archive into a new private folder; ``check_tree`` re-checks that folder before use; ``to_bundle``
turns an accepted archive into a bundle document with one command MCP.
"""

from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.limits import DEFAULT_LIMITS, Limits
from bundle_operator.mcpb.reader import Inspection, ManifestSummary, inspect_file, running_platform
from bundle_operator.mcpb.setup_fields import SetupField
from bundle_operator.mcpb.signature import SignatureResult

__all__ = [
    "DEFAULT_LIMITS",
    "Inspection",
    "Limits",
    "ManifestSummary",
    "Refused",
    "SetupField",
    "SignatureResult",
    "inspect_file",
    "running_platform",
]
