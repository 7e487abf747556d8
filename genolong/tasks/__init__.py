"""What a fine-tuning task is, without Lightning: the task base and registry, the built-in tasks
(promoter, chromatin, labelled), the run settings and loading a task's classifier. The training
itself is :mod:`genolong.training`."""
