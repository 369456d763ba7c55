"""Raw-dataset preprocessors, one module per dataset (filled in by the datasets issue)."""
