"""Training building blocks: objectives as pure functions over model outputs."""
