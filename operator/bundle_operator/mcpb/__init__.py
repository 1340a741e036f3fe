"""Reading .mcpb archives (formerly .dxt): rules, signatures, contained extraction, conversion.

``inspect_file`` (or ``inspect_open`` for bytes in memory) reads and verifies without writing
anything; ``extract_file`` unpacks an accepted archive into a new private folder; ``check_tree``
re-checks that folder before each use; ``to_bundle`` turns an accepted archive into a bundle
document with one command MCP. All of it is blocking file work: from async code, run it in a
worker thread (``anyio.to_thread.run_sync``).
"""

from bundle_operator.mcpb.convert import Conversion, to_bundle
from bundle_operator.mcpb.errors import Refused
from bundle_operator.mcpb.extract import Extracted, extract_file
from bundle_operator.mcpb.limits import DEFAULT_LIMITS, Limits
from bundle_operator.mcpb.reader import (
    Inspection,
    ManifestSummary,
    inspect_file,
    inspect_open,
    running_platform,
)
from bundle_operator.mcpb.setup_fields import SetupField
from bundle_operator.mcpb.signature import SignatureResult
from bundle_operator.mcpb.treedigest import check_tree, tree_digest

__all__ = [
    "DEFAULT_LIMITS",
    "Conversion",
    "Extracted",
    "Inspection",
    "Limits",
    "ManifestSummary",
    "Refused",
    "SetupField",
    "SignatureResult",
    "check_tree",
    "extract_file",
    "inspect_file",
    "inspect_open",
    "running_platform",
    "to_bundle",
    "tree_digest",
]
