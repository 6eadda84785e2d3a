package idemhttp_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/idemgo/idem/idemhttp"
	"github.com/idemgo/idem/store/memstore"
	"github.com/idemgo/idem/store/sqlitestore"
)

// TestNewRefusesNilPointerStore: a Store that is a nil pointer of a store
// type (a constructor's result kept although it failed, a variable never
// assigned) is refused by New naming Config.Store, as a nil Store is,
// instead of accepted and then panicking in every protected request.
func TestNewRefusesNilPointerStore(t *testing.T) {
	var mem *memstore.Store
	var sql *sqlitestore.Store
	for name, cfg := range map[string]idemhttp.Config{
		"memstore":    {Store: mem},
		"sqlitestore": {Store: sql},
	} {
		_, err := idemhttp.New(cfg)
		if err == nil || !strings.Contains(err.Error(), "Config.Store") {
			t.Errorf("%s: New = %v; want an error naming Config.Store", name, err)
		}
		_, err = idemhttp.NewProxy(idemhttp.ProxyConfig{Upstream: &url.URL{Scheme: "http", Host: "127.0.0.1:1"}, Middleware: cfg})
		if err == nil || !strings.Contains(err.Error(), "Config.Store") {
			t.Errorf("%s: NewProxy = %v; want an error naming Config.Store", name, err)
		}
	}
}
