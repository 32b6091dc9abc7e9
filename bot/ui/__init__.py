"""The browser front end (Gradio): it only translates between the page and the core."""
