"""Data windows of 001 (Esper chapter 14), Apama batched windows (003), SPL panes (004).

Use ``registry.make_view_spec`` for one window and ``registry.make_view_chain`` for all
windows declared on a stream; ``spec.build(state, ctx)`` makes the view of a partition.
"""
