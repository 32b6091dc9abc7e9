"""What tests and benchmarks share: free ports, local servers (LLM, Elasticsearch-API, embeddings), fault
injection, the Gradio HTTP client and the browser helpers. Test modules import from here, never from each other."""
