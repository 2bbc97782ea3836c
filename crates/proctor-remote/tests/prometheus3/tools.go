//go:build tools

// Prometheus 3.5 (its Go module, github.com/prometheus/prometheus v0.305.0), built for proctor's
// test command as its own binary, so OTLP is tested against the real receiver
// (`--web.enable-otlp-receiver`, /api/v1/otlp/v1/metrics) and read back through its query API:
//
//	go build -o prometheus3 github.com/prometheus/prometheus/cmd/prometheus
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
