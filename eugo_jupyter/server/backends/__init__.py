"""Launch backends of the EugoHPC Manager: one module per ``kind`` of cluster."""
