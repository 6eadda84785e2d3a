package durable_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemgo/idem/durable"
	"github.com/idemgo/idem/internal/syncbuf"
)

// beatCounter counts the heartbeat statements a pool sends.
type beatCounter struct{ n atomic.Int64 }

func (b *beatCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if data.SQL == durable.HeartbeatSQL {
		b.n.Add(1)
	}
	return ctx
}

func (*beatCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A claim whose outcome is committed, or whose row is handed back, is no
// longer the heartbeat's to extend: the beats sent while the engine still
// reports the step (its log lines, its StepStop hook) do not take the row,
// which has moved on, for a lost lease and warn of one.
func TestFinishedClaimIsNotReportedLost(t *testing.T) {
	t.Parallel()
	for name, handBack := range map[string]bool{"Committed": false, "HandedBack": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// "hold" keeps a claim running, ignoring its context, so that
			// the engine goes on sending heartbeats; "finish" is done at
			// once, or, to be handed back, fails once the engine's hard
			// stop has cancelled its context.
			started, release := make(chan string, 2), make(chan struct{})
			fsm := mustFSM(t, durable.FSMConfig[string]{
				Name: "finished", Initial: "a",
				Steps: map[string]durable.StepFunc[string]{
					"a": func(ctx context.Context, s *durable.Step[string]) (durable.Outcome, error) {
						started <- s.State
						switch {
						case s.State == "hold":
							<-release
						case handBack:
							<-ctx.Done()
							return durable.Outcome{}, ctx.Err()
						}
						return durable.Done(nil), nil
					},
				},
			})
			b := setup(t, nil)
			beats := &beatCounter{}
			cfg := fast(fsm)
			cfg.LeaseTTL, cfg.HeartbeatInterval = 2*time.Second, 20*time.Millisecond
			logs := &syncbuf.Buffer{}
			cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			// The StepStop hook of "finish" holds its worker until three
			// more heartbeats have been sent.
			stopped := make(chan durable.StepStopEvent, 1)
			var finish atomic.Int64
			cfg.Hooks.StepStop = func(ev durable.StepStopEvent) {
				if ev.ID != finish.Load() {
					return
				}
				n := beats.n.Load()
				for deadline := time.Now().Add(20 * time.Second); beats.n.Load() < n+3 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				if beats.n.Load() < n+3 {
					t.Error("no heartbeats were sent while the hook held its worker")
				}
				stopped <- ev
			}
			client, err := durable.NewClient(testPool(t, b.url, func(pc *pgxpool.Config) { pc.ConnConfig.Tracer = beats }), cfg)
			if err != nil {
				t.Fatal(err)
			}
			startClient(t, client)
			closeAtCleanup(t, release)
			if _, err := client.Insert(ctxT(t), fsm.With("hold"), nil); err != nil {
				t.Fatal(err)
			}
			<-started
			id, err := client.Insert(ctxT(t), fsm.With("finish"), nil)
			if err != nil {
				t.Fatal(err)
			}
			finish.Store(id)

			var ev durable.StepStopEvent
			if handBack {
				<-started
				ended, cancel := context.WithCancel(context.Background())
				cancel()
				go func() { _ = client.Stop(ended) }()
				if ev = <-stopped; !ev.HandedBack {
					t.Fatalf("step event %+v, want the row handed back", ev)
				}
			} else if ev = <-stopped; ev.Kind != durable.KindDone || ev.Fenced {
				t.Fatalf("step event %+v, want a committed Done", ev)
			}
			if lost := lostLines(logs.String()); lost != "" {
				t.Errorf("a finished claim was reported lost:\n%s", lost)
			}
		})
	}
}

// lostLines returns the lines of logs that report a lost lease.
func lostLines(logs string) string {
	var out strings.Builder
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "lease lost") {
			out.WriteString(line)
		}
	}
	return out.String()
}
