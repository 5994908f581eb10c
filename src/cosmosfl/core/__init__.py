"""Building blocks shared by every algorithm: protocol, clustering, aggregation, distillation."""
