package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	engramv1 "github.com/engramhq/engram/gen/engram/v1"
)

var taskFields = fieldFlags{
	"task_id": "TASK_ID", "user_id": "user", "session_id": "session", "agent_id": "agent",
	"confirmation_timeout": "confirmation-timeout", "confirmation_default": "confirmation-default",
	"plan.goal": "goal", "plan.steps": "step", "step": "STEP",
}

var taskIDRe = regexp.MustCompile(`^[A-Za-z0-9._:@-]{1,100}$`)

func checkTaskArg(id string) error {
	if !taskIDRe.MatchString(id) {
		return badArg("TASK_ID %q must be 1-100 letters, digits or . _ : @ -", id)
	}
	return nil
}

func taskCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "Drive task workflows: start, plan, confirm, run steps, read state",
		Long: `A task goes CREATED → PLANNING → WAITING_CONFIRMATION → EXECUTING → COMPLETED (or FAILED,
CANCELLED, OUTCOME_UNKNOWN). Steps with side effects call the action endpoint
(ENGRAM_ACTION_URL of the server); a step whose answer is lost goes to OUTCOME_UNKNOWN
and is reconciled by its idempotency key, never blindly sent again.`,
		Example: `  engram task start trip-1 --user u1
  engram task plan trip-1 --goal "Lisbon trip" --step 'hotel:book_hotel:{"city":"Lisbon"}'
  engram task confirm trip-1
  engram task step trip-1
  engram task get trip-1`,
	}
	cmd.AddCommand(taskStartCmd(), taskPlanCmd(), taskConfirmCmd(), taskStepCmd(), taskGetCmd(), taskCompleteCmd(), taskCancelCmd())
	return cmd
}

func taskStartCmd() *cobra.Command {
	var o apiOpts
	var req engramv1.StartTaskRequest
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "start TASK_ID [--user U]",
		Short: "Create a task (CREATED)",
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTaskArg(args[0]); err != nil {
				return err
			}
			if timeout < 0 {
				return badFlag("confirmation-timeout", "is negative")
			}
			switch req.ConfirmationDefault {
			case "", "cancel", "confirm":
			default:
				return badFlag("confirmation-default", "%q is neither cancel nor confirm", req.ConfirmationDefault)
			}
			req.TaskId = args[0]
			if timeout > 0 {
				req.ConfirmationTimeout = durationpb.New(timeout)
			}
			return showTask(cmd, &o, func(ctx context.Context, c *conn) (*engramv1.Task, error) {
				return c.StartTask(ctx, &req)
			})
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&req.UserId, "user", "", "the user the task is for (required unless the key is bound to one)")
	f.StringVar(&req.SessionId, "session", "", "session it starts in")
	f.StringVar(&req.AgentId, "agent", "", "agent driving it (default: the key's)")
	f.DurationVar(&timeout, "confirmation-timeout", 0, "how long a confirmation request waits (default 24h)")
	f.StringVar(&req.ConfirmationDefault, "confirmation-default", "", "when nobody confirms in time: cancel (default) or confirm")
	return cmd
}

// parseStep reads NAME:ACTION[:JSON-INPUT].
func parseStep(v string) (*engramv1.TaskStep, error) {
	name, rest, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(name) == "" {
		return nil, badFlag("step", "%q is not NAME:ACTION[:JSON-INPUT]", v)
	}
	action, input, _ := strings.Cut(rest, ":")
	if strings.TrimSpace(action) == "" {
		return nil, badFlag("step", "%q has no action (NAME:ACTION[:JSON-INPUT])", v)
	}
	if strings.Contains(name, "/") {
		return nil, badFlag("step", "step name %q contains '/'", name)
	}
	st := &engramv1.TaskStep{Name: strings.TrimSpace(name), Action: strings.TrimSpace(action)}
	if strings.TrimSpace(input) != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(input), &m); err != nil {
			return nil, badFlag("step", "input of step %q is not a JSON object: %v", name, err)
		}
		s, err := structpb.NewStruct(m)
		if err != nil {
			return nil, badFlag("step", "input of step %q: %v", name, err)
		}
		st.Input = s
	}
	return st, nil
}

func taskPlanCmd() *cobra.Command {
	var o apiOpts
	var goal, reason string
	var steps []string
	var ask bool
	cmd := &cobra.Command{
		Use:   "plan TASK_ID --goal G --step NAME:ACTION[:JSON] ...",
		Short: "Set the goal and steps, and (unless --ask=false) ask for confirmation",
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTaskArg(args[0]); err != nil {
				return err
			}
			if err := requireFlag("goal", goal); err != nil {
				return err
			}
			if len(steps) == 0 {
				return badFlag("step", "is required: plan at least one step (NAME:ACTION[:JSON-INPUT])")
			}
			plan := &engramv1.PlanOp{Goal: goal}
			seen := map[string]bool{}
			for _, s := range steps {
				st, err := parseStep(s)
				if err != nil {
					return err
				}
				if seen[st.Name] {
					return badFlag("step", "step name %q is used twice", st.Name)
				}
				seen[st.Name] = true
				plan.Steps = append(plan.Steps, st)
			}
			return showTask(cmd, &o, func(ctx context.Context, c *conn) (*engramv1.Task, error) {
				t, err := c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: args[0], Op: &engramv1.UpdateTaskRequest_Plan{Plan: plan}})
				if err == nil && ask {
					t, err = c.UpdateTask(ctx, &engramv1.UpdateTaskRequest{TaskId: args[0], Op: &engramv1.UpdateTaskRequest_RequestConfirmation{
						RequestConfirmation: &engramv1.RequestConfirmationOp{Reason: reason}}})
				}
				return t, err
			})
		},
	}
	f := cmd.Flags()
	o.register(f)
	f.StringVar(&goal, "goal", "", "the task's goal (required)")
	f.StringArrayVar(&steps, "step", nil, `a step NAME:ACTION[:JSON-INPUT], e.g. 'hotel:book_hotel:{"city":"Lisbon"}' (repeatable, in order)`)
	f.BoolVar(&ask, "ask", true, "ask for confirmation after planning (WAITING_CONFIRMATION)")
	f.StringVar(&reason, "reason", "", "why confirmation is needed")
	return cmd
}

func taskConfirmCmd() *cobra.Command {
	var reject bool
	cmd := taskOpCmd("confirm TASK_ID [--reject]", "Confirm the plan (EXECUTING), or reject it (CANCELLED)", func(req *engramv1.UpdateTaskRequest, reason string) {
		req.Op = &engramv1.UpdateTaskRequest_Confirm{Confirm: &engramv1.ConfirmOp{Reject: reject, Reason: reason}}
	})
	cmd.Flags().BoolVar(&reject, "reject", false, "reject the plan instead")
	return cmd
}

func taskCompleteCmd() *cobra.Command {
	return taskOpCmd("complete TASK_ID", "Finish a task whose steps are all done", func(req *engramv1.UpdateTaskRequest, reason string) {
		req.Op = &engramv1.UpdateTaskRequest_Complete{Complete: &engramv1.CompleteOp{Reason: reason}}
	})
}

func taskCancelCmd() *cobra.Command {
	return taskOpCmd("cancel TASK_ID", "Cancel a task with no step in flight", func(req *engramv1.UpdateTaskRequest, reason string) {
		req.Op = &engramv1.UpdateTaskRequest_Cancel{Cancel: &engramv1.CancelOp{Reason: reason}}
	})
}

// taskOpCmd is a command that applies to TASK_ID the operation op sets, with its
// --reason (confirm, complete, cancel).
func taskOpCmd(use, short string, op func(req *engramv1.UpdateTaskRequest, reason string)) *cobra.Command {
	var o apiOpts
	var reason string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTaskArg(args[0]); err != nil {
				return err
			}
			req := &engramv1.UpdateTaskRequest{TaskId: args[0]}
			op(req, reason)
			return showTask(cmd, &o, func(ctx context.Context, c *conn) (*engramv1.Task, error) {
				return c.UpdateTask(ctx, req)
			})
		},
	}
	o.register(cmd.Flags())
	cmd.Flags().StringVar(&reason, "reason", "", "why")
	return cmd
}

func taskStepCmd() *cobra.Command {
	var o apiOpts
	cmd := &cobra.Command{
		Use:   "step TASK_ID [STEP]",
		Short: "Run the named step, or the next one (reconciles a step whose outcome is unknown)",
		Args:  positional(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTaskArg(args[0]); err != nil {
				return err
			}
			step := ""
			if len(args) == 2 {
				if step = strings.TrimSpace(args[1]); step == "" {
					return badArg("STEP is empty: leave it out to run the next step")
				}
			}
			return showTask(cmd, &o, func(ctx context.Context, c *conn) (*engramv1.Task, error) {
				return c.RunStep(ctx, args[0], step)
			})
		},
	}
	o.register(cmd.Flags())
	return cmd
}

func taskGetCmd() *cobra.Command {
	var o apiOpts
	cmd := &cobra.Command{
		Use:   "get TASK_ID",
		Short: "A task's state, steps and recent transitions",
		Args:  positional(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTaskArg(args[0]); err != nil {
				return err
			}
			return showTask(cmd, &o, func(ctx context.Context, c *conn) (*engramv1.Task, error) {
				return c.GetTask(ctx, args[0])
			})
		},
	}
	o.register(cmd.Flags())
	return cmd
}

// showTask runs f (call) and prints the task it answers.
func showTask(cmd *cobra.Command, o *apiOpts, f func(context.Context, *conn) (*engramv1.Task, error)) error {
	t, err := call(cmd, o, taskFields, f)
	if err != nil {
		return err
	}
	return o.show(cmd, t, func(out io.Writer) error { return printTask(out, t) })
}

func printTask(out io.Writer, t *engramv1.Task) error {
	fmt.Fprintf(out, "task %s (user %s): %s\n", t.TaskId, dash(t.UserId), enumName(t.State.String(), "TASK_STATE_"))
	if t.Goal != "" {
		fmt.Fprintf(out, "goal: %s\n", t.Goal)
	}
	if t.NextStep != "" {
		fmt.Fprintf(out, "next step: %s\n", t.NextStep)
	}
	if t.InFlight != "" {
		fmt.Fprintf(out, "in flight: %s\n", t.InFlight)
	}
	if t.LastError != "" {
		fmt.Fprintf(out, "last error: %s\n", t.LastError)
	}
	if t.ConfirmDeadline != nil {
		fmt.Fprintf(out, "confirm before: %s\n", tsText(t.ConfirmDeadline))
	}
	if len(t.Steps) > 0 {
		_ = writeTable(out, "STEP\tACTION\tSTATUS\tSENDS\tRESULT\tERROR", func(tw io.Writer) {
			for _, s := range t.Steps {
				res := "-"
				if s.Result != nil {
					if b, err := s.Result.MarshalJSON(); err == nil {
						res = clip(string(b), 50)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", s.Step.GetName(), s.Step.GetAction(), s.Status, s.Sends, res, clip(dash(s.Error), 50))
			}
		})
	} else if len(t.Done)+len(t.Todo) > 0 {
		fmt.Fprintf(out, "done: %s\ntodo: %s\n", dash(strings.Join(t.Done, ", ")), dash(strings.Join(t.Todo, ", ")))
	}
	if len(t.Transitions) > 0 {
		fmt.Fprintln(out)
		return writeTable(out, "SEQ\tFROM\tTO\tACTOR\tSTEP\tREASON", func(tw io.Writer) {
			for _, tr := range t.Transitions {
				from := "-"
				if tr.From != engramv1.TaskState_TASK_STATE_UNSPECIFIED {
					from = enumName(tr.From.String(), "TASK_STATE_")
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", tr.Seq, from, enumName(tr.To.String(), "TASK_STATE_"), tr.Actor, dash(tr.Step), clip(tr.Reason, 70))
			}
		})
	}
	return nil
}
