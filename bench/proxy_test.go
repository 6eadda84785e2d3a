package bench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/store/pgstore"
	"github.com/idemgo/idem/store/redisstore"
	"github.com/idemgo/idem/store/sqlitestore"
)

// proxyUpstream answers every POST with a small JSON body.
func proxyUpstream(b *testing.B) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"ch_1","amount":100}`)
	}))
	b.Cleanup(up.Close)
	return up
}

var keySeq atomic.Int64

// load sends n POSTs with unique keys to base from c concurrent clients
// and returns the requests per second.
func load(b *testing.B, client *http.Client, base string, n, c int) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/charges", strings.NewReader(benchBody))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "k-"+strconv.FormatInt(keySeq.Add(1), 36))
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusCreated {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		b.Fatalf("%d of %d requests failed", f, n)
	}
	return float64(n) / time.Since(start).Seconds()
}

// benchProxy measures idem's proxy on store beside a plain
// httputil.ReverseProxy to the same upstream, alternating rounds of the two
// so that both see the same machine, and reports idem's throughput as a
// fraction of the plain proxy's ("x-plain-proxy", higher is better).
func benchProxy(b *testing.B, store idem.Store) {
	up := proxyUpstream(b)
	u, _ := url.Parse(up.URL)
	// Both proxies reach the upstream through the same kind of transport,
	// the one idem proxy uses by default: it keeps enough idle connections
	// for the load (http.DefaultTransport keeps 2 per host, so that either
	// proxy would dial for most requests and measure dialing).
	plainT, idemT := upstreamTransport(), upstreamTransport()
	defer plainT.CloseIdleConnections()
	defer idemT.CloseIdleConnections()
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = plainT
	plain := httptest.NewServer(rp)
	defer plain.Close()
	// The middleware as idem proxy configures it by default.
	h, err := idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: u, Transport: idemT, Timeout: 60 * time.Second,
		Middleware: idemhttp.Config{Store: store, Retention: 24 * time.Hour, Lease: 30 * time.Second, StoreTimeout: 10 * time.Second}})
	if err != nil {
		b.Fatal(err)
	}
	withIdem := httptest.NewServer(h)
	defer withIdem.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	const conc = 32
	rounds := 8
	per := b.N/rounds + 1
	load(b, client, plain.URL, 200, conc) // warm both up
	load(b, client, withIdem.URL, 200, conc)
	b.ResetTimer()
	var plainRate, idemRate float64
	for i := range rounds {
		if i%2 == 0 {
			plainRate += load(b, client, plain.URL, per, conc)
			idemRate += load(b, client, withIdem.URL, per, conc)
		} else {
			idemRate += load(b, client, withIdem.URL, per, conc)
			plainRate += load(b, client, plain.URL, per, conc)
		}
	}
	b.StopTimer()
	b.ReportMetric(storeCeiling(b, store, per, conc), "store-pairs/s")
	b.ReportMetric(idemRate/float64(rounds), "idem-req/s")
	b.ReportMetric(plainRate/float64(rounds), "plain-req/s")
	b.ReportMetric(idemRate/plainRate, "x-plain-proxy")
}

// upstreamTransport is the transport both proxies reach the upstream with:
// idem proxy's default.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = t.MaxIdleConns
	return t
}

// storeCeiling is the store's own limit: Begin+Commit pairs per second
// with the same concurrency, no HTTP.
func storeCeiling(b *testing.B, s idem.Store, n, c int) float64 {
	ns := idem.MustNamespace("ceiling")
	req := mustReq(benchBody)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for next.Add(1) <= int64(n) {
				k, _ := idem.ParseKey(ns, "c-"+strconv.FormatInt(keySeq.Add(1), 36))
				o, err := s.Begin(ctx, k, req, nil)
				if err == nil && o.Kind == idem.Fresh {
					err = s.Commit(ctx, k, o.Lease, benchResult)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

func BenchmarkProxyMemory(b *testing.B) {
	s, err := memstore.New(memstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	benchProxy(b, s)
}

func BenchmarkProxyRedis(b *testing.B) {
	u := os.Getenv("TEST_REDIS_URL")
	if u == "" {
		b.Skip("TEST_REDIS_URL not set")
	}
	// The client and store as idem proxy opens them from a redis:// DSN.
	opts, err := redis.ParseURL(u)
	if err != nil {
		b.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	s, err := redisstore.New(client, redisstore.Config{Prefix: fmt.Sprintf("bench-proxy-%d:", time.Now().UnixNano()), AutoPipeline: true})
	if err != nil {
		b.Fatal(err)
	}
	benchProxy(b, s)
}

func BenchmarkProxySQLite(b *testing.B) {
	path := filepath.Join(b.TempDir(), "idem.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	// The store as idem proxy opens it from a sqlite: DSN.
	s, err := sqlitestore.New(db, sqlitestore.Config{Batch: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	benchProxy(b, s)
}

func BenchmarkProxyPostgres(b *testing.B) {
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		b.Skip("TEST_DATABASE_URL not set")
	}
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	table := fmt.Sprintf("bench_proxy_%d", time.Now().UnixNano())
	// The store as idem proxy opens it from a postgres:// DSN.
	s, err := pgstore.New(pool, pgstore.Config{Table: table, Pipeline: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer pool.Exec(context.Background(), "DROP TABLE "+table)
	benchProxy(b, s)
}
