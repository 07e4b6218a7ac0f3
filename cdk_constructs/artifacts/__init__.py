"""The model-artifacts bucket: base models and adapters, read by the image build and by adapter components."""
