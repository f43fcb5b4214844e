"""Recipes and patchsets as schema data: YAML with line numbers, schemas, conditions, globs, shipped data."""
