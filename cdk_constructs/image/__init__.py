"""The serving image: its ECR repository and its in-account build (inputs, buildspec, Docker Hub cache;
handler: ``runtime/``)."""
