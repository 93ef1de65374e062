"""A diffusion lab's endpoints both answer a case (the manifest's case shape): a sample's chain, or a drawing's."""
