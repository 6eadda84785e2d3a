package durable

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
)

// TestGuardCoversEveryHook checks that Hooks.guard recovers the panics of
// every field of Hooks, so that a hook added later cannot be left out.
func TestGuardCoversEveryHook(t *testing.T) {
	var h Hooks
	v := reflect.ValueOf(&h).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		f.Set(reflect.MakeFunc(f.Type(), func([]reflect.Value) []reflect.Value { panic("boom") }))
	}
	h.guard(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range v.NumField() {
		f := v.Field(i)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("Hooks.%s: the panic was not recovered: %v", v.Type().Field(i).Name, p)
				}
			}()
			f.Call([]reflect.Value{reflect.Zero(f.Type().In(0))})
		}()
	}
}
