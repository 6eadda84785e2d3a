package stripeinterop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
	stripe "github.com/stripe/stripe-go/v85"
)

// testAPIKey is the secret key the SDK sends, as "Authorization: Bearer …".
const testAPIKey = "sk_test_idem_interop"

// TestSDKRetryAfterLostResponseIsReplayed (H22): the first response to a
// charge creation is lost on the network; the SDK retries by itself with
// the key it generated, and gets the charge the API created on its one
// execution.
func TestSDKRetryAfterLostResponseIsReplayed(t *testing.T) {
	api := newFakeStripe(t)
	relay := newLossyRelay(t, newProxy(t, api.srv.URL), 1)
	sc, sdkLog := newSDKClient(t, relay.srv.URL)

	ch, err := sc.V1Charges.Create(context.Background(), chargeParams())
	if err != nil {
		t.Fatalf("Charges.Create: %v (SDK log: %q)", err, sdkLog.lines())
	}

	keys := relay.keys()
	if len(keys) < 2 {
		t.Fatalf("the relay saw %d requests (%q), want the lost one and at least one retry", len(keys), keys)
	}
	key := keys[0]
	if key == "" {
		t.Fatal("the SDK sent no Idempotency-Key")
	}
	for i, k := range keys {
		if k != key {
			t.Fatalf("request %d carried Idempotency-Key %q, want the first one's %q", i, k, key)
		}
	}
	if n := sdkLog.retries(); n < 1 {
		t.Fatalf("the SDK logged no retry of its own: %q", sdkLog.lines())
	}

	ids := api.executions(key)
	if len(ids) != 1 {
		t.Fatalf("the API ran %d times for key %q (charges %q), want 1", len(ids), key, ids)
	}
	if total := api.total(); total != 1 {
		t.Fatalf("the API ran %d times in all, want 1", total)
	}
	if ch.ID != ids[0] {
		t.Fatalf("the SDK got charge %q, want %q, the one the API created", ch.ID, ids[0])
	}
	if ch.Amount != 2000 || ch.Currency != stripe.CurrencyUSD {
		t.Fatalf("charge decoded as amount %d currency %q, want 2000 usd", ch.Amount, ch.Currency)
	}
	if ch.LastResponse == nil || ch.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the SDK's answer was not the replay of the recorded response: %+v", ch.LastResponse)
	}
}

// TestSDKDistinctCallsExecuteSeparately: two charge creations are two
// operations, each with a key of its own that the SDK generated, so the API
// runs twice, also when the first one's response was lost and retried.
func TestSDKDistinctCallsExecuteSeparately(t *testing.T) {
	api := newFakeStripe(t)
	relay := newLossyRelay(t, newProxy(t, api.srv.URL), 1)
	sc, sdkLog := newSDKClient(t, relay.srv.URL)

	var charges [2]*stripe.Charge
	for i := range charges {
		ch, err := sc.V1Charges.Create(context.Background(), chargeParams())
		if err != nil {
			t.Fatalf("Charges.Create #%d: %v (SDK log: %q)", i+1, err, sdkLog.lines())
		}
		charges[i] = ch
	}

	var distinct []string
	for _, k := range relay.keys() {
		if k == "" {
			t.Fatal("the SDK sent a POST without Idempotency-Key")
		}
		if len(distinct) == 0 || distinct[len(distinct)-1] != k {
			distinct = append(distinct, k)
		}
	}
	if len(distinct) != 2 || distinct[0] == distinct[1] {
		t.Fatalf("Idempotency-Keys seen by the relay: %q, want two distinct ones, each for a run of requests", relay.keys())
	}
	if total := api.total(); total != 2 {
		t.Fatalf("the API ran %d times, want 2", total)
	}
	for i, key := range distinct {
		ids := api.executions(key)
		if len(ids) != 1 {
			t.Fatalf("the API ran %d times for key %q, want 1", len(ids), key)
		}
		if charges[i].ID != ids[0] {
			t.Fatalf("call #%d got charge %q, want %q", i+1, charges[i].ID, ids[0])
		}
	}
	if charges[0].ID == charges[1].ID {
		t.Fatalf("both calls got charge %q", charges[0].ID)
	}
}

func chargeParams() *stripe.ChargeCreateParams {
	// No IdempotencyKey: the SDK generates one, as it does for every POST.
	return &stripe.ChargeCreateParams{
		Amount:   stripe.Int64(2000),
		Currency: stripe.String(string(stripe.CurrencyUSD)),
		Source:   &stripe.PaymentSourceSourceParams{Token: stripe.String("tok_visa")},
	}
}

// newSDKClient returns a Stripe client whose API base URL is baseURL, and
// the log its backend writes. The client has an HTTP client of its own, so
// that its first request opens a new connection: net/http retries a request
// carrying an Idempotency-Key by itself only on a reused connection, so
// every retry seen here is the SDK's.
func newSDKClient(t *testing.T, baseURL string) (*stripe.Client, *sdkLogger) {
	t.Helper()
	httpClient := &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:   10 * time.Second,
	}
	t.Cleanup(httpClient.CloseIdleConnections)
	logger := &sdkLogger{t: t}
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: httpClient,
		URL:        stripe.String(baseURL),
		// The SDK's own retries (2 is also its default); their backoff is
		// the SDK's, 0.5 s before the first retry, which production
		// clients see too. The only knob to shorten it
		// (SetNetworkRetriesSleep) is documented as for the SDK's own
		// tests.
		MaxNetworkRetries: stripe.Int64(2),
		LeveledLogger:     logger,
	})
	return stripe.NewClient(testAPIKey, stripe.WithBackends(backends)), logger
}

// sdkLogger is the SDK's LeveledLogger: it keeps the SDK's messages, among
// them the "Initiating retry" of each retry it makes.
type sdkLogger struct {
	t    *testing.T
	mu   sync.Mutex
	msgs []string
}

func (l *sdkLogger) add(level, format string, v ...any) {
	msg := level + " " + fmt.Sprintf(format, v...)
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
	l.t.Log("stripe-go: " + msg)
}

func (l *sdkLogger) Debugf(format string, v ...any) { l.add("debug", format, v...) }
func (l *sdkLogger) Infof(format string, v ...any)  { l.add("info", format, v...) }
func (l *sdkLogger) Warnf(format string, v ...any)  { l.add("warn", format, v...) }
func (l *sdkLogger) Errorf(format string, v ...any) { l.add("error", format, v...) }

func (l *sdkLogger) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// retries counts the retries the SDK says it made.
func (l *sdkLogger) retries() int {
	n := 0
	for _, m := range l.lines() {
		if strings.Contains(m, "Initiating retry") {
			n++
		}
	}
	return n
}

// newProxy starts idemhttp.NewProxy in front of upstream and returns its
// base URL.
func newProxy(t *testing.T, upstream string) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	store, err := memstore.New(memstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := idemhttp.NewProxy(idemhttp.ProxyConfig{
		Upstream: u,
		Middleware: idemhttp.Config{
			Store: store,
			// The Stripe profile, as for any API whose clients are
			// Stripe's SDKs: they were written against Stripe's
			// semantics, where every response that reached the API is
			// stored, 5xx included, so that their retry of a 500 gets
			// the same 500 back instead of running the request again
			// (and a reused key with other parameters is 400; how the SDK
			// takes that refusal is the business of
			// TestSDKKeyReusedWithOtherParametersIsAnIdempotencyError).
			// Keys are not required,
			// as Stripe does not require them; the SDK sends one anyway.
			Profile: idemhttp.ProfileStripe,
		},
		Timeout:  10 * time.Second,
		ErrorLog: log.New(testWriter{t}, "", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// fakeStripe is a Stripe-like API: POST /v1/charges with the form-encoded
// body the SDK sends creates a charge with a new id and answers it as JSON.
// It counts its executions per Idempotency-Key.
type fakeStripe struct {
	srv     *httptest.Server
	mu      sync.Mutex
	charges map[string][]string // Idempotency-Key → id of each charge created
	n       int

	// started, if not nil, gets a value when a charge creation begins;
	// hold, if not nil, is waited for before the charge is created.
	started chan struct{}
	hold    chan struct{}
}

func newFakeStripe(t *testing.T) *fakeStripe {
	t.Helper()
	f := &fakeStripe{charges: map[string][]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" {
		stripeError(w, http.StatusNotFound, "Unrecognized request URL ("+r.Method+": "+r.URL.Path+").")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+testAPIKey {
		stripeError(w, http.StatusUnauthorized, "Invalid API Key provided.")
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		stripeError(w, http.StatusBadRequest, "Invalid Content-Type "+r.Header.Get("Content-Type"))
		return
	}
	if err := r.ParseForm(); err != nil {
		stripeError(w, http.StatusBadRequest, err.Error())
		return
	}
	amount, err := strconv.ParseInt(r.PostForm.Get("amount"), 10, 64)
	currency := r.PostForm.Get("currency")
	if err != nil || amount <= 0 || currency == "" || r.PostForm.Get("source") == "" {
		stripeError(w, http.StatusBadRequest, "Missing or invalid amount, currency or source.")
		return
	}
	if f.started != nil {
		select {
		case f.started <- struct{}{}:
		default:
		}
	}
	if f.hold != nil {
		<-f.hold
	}
	id := "ch_" + rand.Text()
	f.mu.Lock()
	key := r.Header.Get("Idempotency-Key")
	f.charges[key] = append(f.charges[key], id)
	f.n++
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": id, "object": "charge", "amount": amount, "amount_captured": amount,
		"currency": currency, "captured": true, "paid": true, "status": "succeeded",
		"livemode": false, "created": time.Now().Unix(),
	})
}

func stripeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"type": "invalid_request_error", "message": msg},
	})
}

// executions returns the ids of the charges created for key.
func (f *fakeStripe) executions(key string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.charges[key]...)
}

// total is the number of charges created.
func (f *fakeStripe) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// lossyRelay sits between the SDK and the proxy. It forwards each request
// and notes its Idempotency-Key; of the first `lose` requests, it reads the
// proxy's whole response and then closes the client's connection without
// writing any of it, as a network that loses a reply would.
type lossyRelay struct {
	srv    *httptest.Server
	t      *testing.T
	target string
	client *http.Client

	// answered, if not nil, gets the status of each response of the
	// proxy, as it arrives (those beyond its buffer are not sent).
	answered chan int

	mu   sync.Mutex
	seen []string // Idempotency-Key of each request, in arrival order
	lose int
}

func newLossyRelay(t *testing.T, target string, lose int) *lossyRelay {
	t.Helper()
	l := &lossyRelay{
		t:      t,
		target: target,
		client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 10 * time.Second},
		lose:   lose,
	}
	l.srv = httptest.NewServer(http.HandlerFunc(l.serve))
	t.Cleanup(l.srv.Close)
	t.Cleanup(l.client.CloseIdleConnections)
	return l
}

func (l *lossyRelay) serve(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.seen = append(l.seen, r.Header.Get("Idempotency-Key"))
	lose := l.lose > 0
	if lose {
		l.lose--
	}
	l.mu.Unlock()

	body, err := io.ReadAll(r.Body)
	if err != nil {
		l.t.Errorf("relay: reading the request: %v", err)
		return
	}
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, l.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		l.t.Errorf("relay: %v", err)
		return
	}
	out.Header = r.Header.Clone()
	res, err := l.client.Do(out)
	if err != nil {
		l.t.Errorf("relay: forwarding to the proxy: %v", err)
		return
	}
	resBody, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		l.t.Errorf("relay: reading the proxy's response: %v", err)
		return
	}
	if l.answered != nil {
		select {
		case l.answered <- res.StatusCode:
		default:
		}
	}
	if lose {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			l.t.Errorf("relay: hijacking the client's connection: %v", err)
			return
		}
		l.t.Logf("relay: losing the response %d to the request with Idempotency-Key %q", res.StatusCode, r.Header.Get("Idempotency-Key"))
		conn.Close()
		return
	}
	maps.Copy(w.Header(), res.Header)
	w.WriteHeader(res.StatusCode)
	_, _ = w.Write(resBody)
}

// keys returns the Idempotency-Key of each request the relay saw.
func (l *lossyRelay) keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}
