"""Loss functions (datafits): value, gradient and curvature bounds, vectorised over rows."""
