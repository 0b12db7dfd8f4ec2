// A batch scheduler's side of a card (SLURM, Grid Engine...): one row per job (head, workers)
// with the scheduler's state, the reason a pending job waits, its nodes and the time left;
// Remove on worker rows, Add node below. Shown for any kind whose nodes are jobs (or, on
// Kubernetes, pods: the same row with the pod's phase and the reason it is not running).
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { batchState, IBatchJob, ICluster } from '../api';
import { CommandIDs } from '../commands';

/** Seconds as the card shows them: "59 min", "1 h 05 min", "45 s". */
export function formatTimeLeft(seconds: number | null): string {
  if (seconds === null || seconds === undefined) {
    return '–';
  }
  if (seconds < 60) {
    return `${seconds} s`;
  }
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) {
    return `${minutes} min`;
  }
  const rest = minutes % 60;
  return `${Math.floor(minutes / 60)} h ${rest < 10 ? '0' : ''}${rest} min`;
}

interface IJobsProps {
  cluster: ICluster;
  busy: boolean;
  commands: CommandRegistry;
}

function JobRow({
  job,
  cluster,
  busy,
  commands
}: IJobsProps & { job: IBatchJob }) {
  const removable = job.role === 'worker' && cluster.status === 'running';
  return (
    <tr data-job={job.id} data-state={job.state}>
      <td>{job.id}</td>
      <td>{job.role}</td>
      <td className={`eugo-JobState eugo-mod-${job.state.toLowerCase()}`}>
        {job.state}
        {job.reason && <div className="eugo-JobReason">{job.reason}</div>}
      </td>
      <td>{job.nodes.join(', ') || '–'}</td>
      <td>{formatTimeLeft(job.time_left)}</td>
      <td>
        {removable && (
          <button
            type="button"
            className="jp-Button jp-mod-styled eugo-Action eugo-mod-small"
            disabled={busy}
            title={`Cancel worker job ${job.id}`}
            onClick={() =>
              void commands.execute(CommandIDs.removeNode, {
                id: cluster.id,
                node: job.id
              })
            }
          >
            Remove
          </button>
        )}
      </td>
    </tr>
  );
}

export function BatchJobs({
  cluster,
  busy,
  commands
}: IJobsProps): JSX.Element | null {
  const slurm = batchState(cluster);
  if (!slurm) {
    return null;
  }
  // A scheduler's jobs, or Kubernetes' pods: the kind says what one row is.
  const row = cluster.facts?.node_label === 'pod' ? 'pod' : 'job';
  const label = `${cluster.facts?.label ?? cluster.kind} ${row}s`;
  return (
    <details className="eugo-Card-jobs" open>
      <summary>
        {label} <span className="eugo-Count">{slurm.jobs.length}</span>
      </summary>
      {slurm.error && (
        <div className="eugo-Notice eugo-mod-warn">{slurm.error}</div>
      )}
      <table className="eugo-Jobs" aria-label={label}>
        <thead>
          <tr>
            <th>{row === 'pod' ? 'Pod' : 'Job'}</th>
            <th>Role</th>
            <th>State</th>
            <th>Nodes</th>
            <th>Left</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {slurm.jobs.map(job => (
            <JobRow
              key={job.id}
              job={job}
              cluster={cluster}
              busy={busy}
              commands={commands}
            />
          ))}
        </tbody>
      </table>
      {cluster.scalable && cluster.status === 'running' && (
        <button
          type="button"
          className="jp-Button jp-mod-styled eugo-Action"
          disabled={busy}
          onClick={() =>
            void commands.execute(CommandIDs.addNode, { id: cluster.id })
          }
        >
          Add node
        </button>
      )}
    </details>
  );
}
