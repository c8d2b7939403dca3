"""Theme files for the Textual app (ship inside the package)."""
