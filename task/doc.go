// Package task keeps task state apart from memory: the Task workflow (a state
// machine with PLANNING, WAITING_CONFIRMATION, EXECUTING, OUTCOME_UNKNOWN, …,
// driven by updates), its side-effecting actions (CallAction with an idempotency
// key per step), the reconciliation that resolves OUTCOME_UNKNOWN by asking the
// action's status endpoint instead of repeating the call (TASK_ACTIONS.md is the
// contract an action endpoint implements), the task's workflow id and start
// options, and Register.
//
// It may import memory and storage only.
package task
