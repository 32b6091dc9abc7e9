"""The admin's knowledge editing service: saves through the store, the index refreshed, entry pages to browse."""
