"""The zeus-kfp KFP components: thin lightweight Python components whose bodies import zeus
and call one function of zeus_kfp.steps. They run in the project's image on a cluster and under
kfp.local.SubprocessRunner here; `components.registry.components_for(image)` rebuilds them on
another image.

This file imports nothing on purpose: a component's executor imports components.artifacts
(for the PowerProfile type) while kfp.dsl is still initialising, and importing the component
modules here would make that a circular import.
"""
