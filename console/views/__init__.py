"""The staff pages, one module per subject."""
