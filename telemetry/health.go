package telemetry

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"time"

	"go.temporal.io/sdk/client"
)

// Healthz answers 200 while the process serves (liveness).
func Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
}

// Readyz answers 200 when Postgres and Temporal both answer, 503 otherwise, with
// each dependency's state: {"status":"ready","postgres":"ok","temporal":"ok"}.
func Readyz(db *sql.DB, tc client.Client) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		out := map[string]string{"status": "ready", "postgres": "ok", "temporal": "ok"}
		code := http.StatusOK
		if err := db.PingContext(ctx); err != nil {
			out["postgres"], out["status"], code = "unavailable: "+err.Error(), "not ready", http.StatusServiceUnavailable
		}
		if _, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			out["temporal"], out["status"], code = "unavailable: "+err.Error(), "not ready", http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(out)
	})
}
