"""netstack in containers: compose/stack files for a topology, the node runner inside each
container, and the discovery that lets the CLI work against such a deployment
(docs/containers.md)."""
