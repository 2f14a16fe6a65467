"""The routers of `t25 serve`, one per part of the API; `t25_tui.api.server.make_api` mounts them.

tasks      filing, listing and reading tasks, and a task's events
decisions  the operator decisions, each a `Decision` handed to the control plane
runs       runs and artifacts
reads      health, the audit trail, cost, the configuration
events     the event stream (SSE)
worker     the lease protocol of remote workers
"""
