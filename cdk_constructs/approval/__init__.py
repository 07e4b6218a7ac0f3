"""The deploy's approval check (issue 47): a Serving stack deploy goes on only when every pinned base-model and
adapter version is an Approved model package in the release's model registry.

One capability, laid out like the compile cache (the construct with its ``runtime/`` beside it):

=================================================  =========================================================
``cdk_constructs/approval/approved_pins.py``       the construct: ``ApprovedPins``, one ``Custom::ApprovedPins``
                                                   resource and its handler's permissions
``cdk_constructs/approval/runtime/index.py``       the custom resource's Lambda handler: looks each pin up,
                                                   fails the deploy naming the package and its status
``serving_contract/model_packages.py``             the lookup and its one-line refusals, shared with
                                                   ``ops preflight`` / ``ops pin_artifacts`` (bundled into the
                                                   handler's asset)
``app_config/release.py``                          ``release.deploy_approval``: always on in prod, a dev stage
                                                   may waive it with a reason
=================================================  =========================================================

Tests: ``tests/lambdas/test_approved_pins_handler.py`` (the handler against botocore's Stubber),
``tests/infra/test_approved_pins.py`` (the template: the resource, what depends on it, its permissions).

This ``__init__`` imports nothing, so the handler's tests import ``cdk_constructs.approval.runtime.index``
without loading aws-cdk.
"""
