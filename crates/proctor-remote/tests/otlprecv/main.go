// An OTLP/HTTP metrics receiver for proctor's test command, made of the real parts: every
// request goes through Prometheus 3.5's own OTLP write handler (storage/remote, what
// `prometheus --web.enable-otlp-receiver` serves at /api/v1/otlp/v1/metrics) into a real
// Prometheus TSDB in DIR, and is also decoded by the OpenTelemetry Collector's pdata
// (pmetricotlp, what the Collector's OTLP receiver uses) and written as the Collector's file
// exporter writes it (one pmetric JSON document per line) to DIR/otlp.jsonl.
//
//	go build -o otlprecv . && ./otlprecv 127.0.0.1:PORT DIR
//
// POST /v1/metrics and /api/v1/otlp/v1/metrics take requests; DIR/requests.jsonl gets one
// line per request (headers, status, the handler's answer); GET /dump answers every series in
// the TSDB with its samples, as JSON. A restart on the same DIR keeps what was taken (the
// TSDB's WAL), as a restarted Prometheus does.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage/remote"
	"github.com/prometheus/prometheus/tsdb"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
)

type request struct {
	Path            string `json:"path"`
	ContentType     string `json:"content_type"`
	ContentEncoding string `json:"content_encoding"`
	Authorization   string `json:"authorization"`
	UserAgent       string `json:"user_agent"`
	Custom          string `json:"x_proctor_test"`
	Bytes           int    `json:"bytes"`
	Status          int    `json:"status"`
	Answer          string `json:"answer"`
	Decoded         string `json:"pdata_error"`
	DataPoints      int    `json:"data_points"`
}

type point struct {
	T int64   `json:"t"`
	V float64 `json:"v"`
}

type series struct {
	Labels  map[string]string `json:"labels"`
	Samples []point           `json:"samples"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: otlprecv ADDR DIR")
		os.Exit(2)
	}
	addr, dir := os.Args[1], os.Args[2]
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts := tsdb.DefaultOptions()
	db, err := tsdb.Open(filepath.Join(dir, "tsdb"), logger, nil, opts, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tsdb:", err)
		os.Exit(1)
	}
	cfg := config.DefaultConfig
	prom := remote.NewOTLPWriteHandler(logger, nil, db, func() config.Config { return cfg }, remote.OTLPOptions{})
	var mu sync.Mutex
	open := func(name string) *os.File {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return f
	}
	requests, files := open("requests.jsonl"), open("otlp.jsonl")

	take := func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seen := request{
			Path: r.URL.Path, ContentType: r.Header.Get("Content-Type"),
			ContentEncoding: r.Header.Get("Content-Encoding"), Authorization: r.Header.Get("Authorization"),
			UserAgent: r.Header.Get("User-Agent"), Custom: r.Header.Get("X-Proctor-Test"), Bytes: len(body),
		}
		// The Collector's side: pdata decodes it, the file exporter's JSON is written.
		raw := body
		if seen.ContentEncoding == "gzip" {
			if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
				raw, err = io.ReadAll(zr)
				if err != nil {
					seen.Decoded = "gzip: " + err.Error()
				}
			} else {
				seen.Decoded = "gzip: " + err.Error()
			}
		}
		req := pmetricotlp.NewExportRequest()
		if err := req.UnmarshalProto(raw); err != nil {
			seen.Decoded = err.Error()
		} else {
			seen.DataPoints = req.Metrics().DataPointCount()
			doc, err := (&pmetric.JSONMarshaler{}).MarshalMetrics(req.Metrics())
			if err == nil {
				mu.Lock()
				files.Write(append(doc, '\n'))
				mu.Unlock()
			}
		}
		// Prometheus's side: its own handler into its own TSDB.
		inner := r.Clone(context.Background())
		inner.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		prom.ServeHTTP(rec, inner)
		seen.Status, seen.Answer = rec.Code, rec.Body.String()
		for k, vs := range rec.Header() {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		line, _ := json.Marshal(seen)
		mu.Lock()
		requests.Write(append(line, '\n'))
		mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/metrics", take)
	mux.HandleFunc("/api/v1/otlp/v1/metrics", take)
	mux.HandleFunc("/dump", func(w http.ResponseWriter, r *http.Request) {
		q, err := db.Querier(math.MinInt64, math.MaxInt64)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer q.Close()
		set := q.Select(r.Context(), true, nil, labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+"))
		out := []series{}
		for set.Next() {
			s := set.At()
			one := series{Labels: s.Labels().Map(), Samples: []point{}}
			it := s.Iterator(nil)
			for it.Next() != 0 {
				t, v := it.At()
				one.Samples = append(one.Samples, point{t, v})
			}
			out = append(out, one)
		}
		if err := set.Err(); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		// With its length: the tests' HTTP reader takes no chunked bodies.
		body, _ := json.Marshal(out)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	fmt.Fprintln(os.Stderr, "otlprecv listening on", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
