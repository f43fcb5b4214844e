"""The error classifier: rules as data (rules/*.yaml), the scanner, findings."""
