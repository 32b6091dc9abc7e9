"""Knowledge: entries and their JSON files (loading, validation) and the store that edits them."""
