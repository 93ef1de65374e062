"""A feature-geometry lab's runs answer a case (the manifest's case shape); it has no other endpoint."""
