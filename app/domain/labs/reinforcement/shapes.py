"""A reinforcement lab's endpoints both answer a case (the manifest's case shape): an episode, or the policy."""
