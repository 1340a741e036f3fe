"""Every command a documentation page shows, run in its scene (see README.md)."""
