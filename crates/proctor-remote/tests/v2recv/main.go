// A remote write 2.0 receiver for proctor's test command: Prometheus's own decoding
// (prompb/io/prometheus/write/v2, as Prometheus 3.x's receiver uses it) of every request, one
// JSON line per request on stdout; a request it cannot take gets a 400 saying why.
//
//	go build -o v2recv . && ./v2recv 127.0.0.1:PORT
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
)

type seen struct {
	ContentType string   `json:"content_type"`
	Version     string   `json:"version"`
	Encoding    string   `json:"encoding"`
	Series      int      `json:"series"`
	Samples     int      `json:"samples"`
	Symbols     int      `json:"symbols"`
	Load1       string   `json:"load1,omitempty"`
	Problems    []string `json:"problems"`
}

func take(r *http.Request) (seen, error) {
	s := seen{
		ContentType: r.Header.Get("Content-Type"),
		Version:     r.Header.Get("X-Prometheus-Remote-Write-Version"),
		Encoding:    r.Header.Get("Content-Encoding"),
		Problems:    []string{},
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return s, err
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return s, fmt.Errorf("snappy: %w", err)
	}
	var req writev2.Request
	if err := req.Unmarshal(raw); err != nil {
		return s, fmt.Errorf("protobuf: %w", err)
	}
	s.Series, s.Symbols = len(req.Timeseries), len(req.Symbols)
	if len(req.Symbols) == 0 || req.Symbols[0] != "" {
		s.Problems = append(s.Problems, "symbols[0] is not the empty string")
	}
	b := labels.NewScratchBuilder(0)
	for _, ts := range req.Timeseries {
		s.Samples += len(ts.Samples)
		// Names in the order sent must be strictly increasing (sorted, no duplicates).
		for i := 2; i+1 < len(ts.LabelsRefs); i += 2 {
			if req.Symbols[ts.LabelsRefs[i-2]] >= req.Symbols[ts.LabelsRefs[i]] {
				s.Problems = append(s.Problems, "labels not sorted by name")
			}
		}
		for i := 1; i < len(ts.Samples); i++ {
			if ts.Samples[i].Timestamp <= ts.Samples[i-1].Timestamp {
				s.Problems = append(s.Problems, "samples not in time order")
			}
		}
		lbls := ts.ToLabels(&b, req.Symbols)
		if lbls.Get("__name__") == "proctor_host_load1" {
			meta := ts.ToMetadata(req.Symbols)
			s.Load1 = fmt.Sprintf("%s type=%s help=%q", lbls.String(), meta.Type, meta.Help)
		}
	}
	return s, nil
}

func main() {
	out := json.NewEncoder(os.Stdout)
	http.HandleFunc("/api/v1/write", func(w http.ResponseWriter, r *http.Request) {
		s, err := take(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = out.Encode(s)
		w.Header().Set("X-Prometheus-Remote-Write-Samples-Written", fmt.Sprint(s.Samples))
		w.WriteHeader(http.StatusNoContent)
	})
	if err := http.ListenAndServe(os.Args[1], nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
