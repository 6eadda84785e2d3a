package payments

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A refused charge is answered with a JSON error labelled as JSON, as the
// charges themselves are: a client (or idem proxy's record of the answer)
// that goes by Content-Type reads it as what it is.
func TestRefusedChargeIsJSON(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	for _, body := range []string{`{"customer":"c1","amount":0}`, `not json`} {
		res, err := http.Post(srv.URL+"/charges", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error string `json:"error"`
		}
		if res.StatusCode != http.StatusBadRequest || res.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &e) != nil || e.Error == "" {
			t.Errorf("POST %s: %d, Content-Type %q, body %q; want 400 with an application/json {\"error\":…}", body, res.StatusCode, res.Header.Get("Content-Type"), b)
		}
	}
}

// GET /charges is a JSON array, also before the first charge.
func TestListIsArray(t *testing.T) {
	srv := httptest.NewServer(New())
	defer srv.Close()
	list := func() string {
		t.Helper()
		res, err := http.Get(srv.URL + "/charges")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := list(); got != "[]" {
		t.Errorf("GET /charges with no charges: %s, want []", got)
	}
	res, err := http.Post(srv.URL+"/charges", "application/json", strings.NewReader(`{"customer":"c1","amount":500}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got, want := list(), `[{"id":"ch_1","customer":"c1","amount":500}]`; got != want {
		t.Errorf("GET /charges after one charge: %s, want %s", got, want)
	}
}
