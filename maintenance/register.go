package maintenance

import "go.temporal.io/sdk/worker"

func registerMaintenance(w worker.Registry, d Deps) {}
