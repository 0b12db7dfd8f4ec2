// Failures: the failed tasks, newest first, with error, node, function and the traceback.
import * as React from 'react';

import { ClusterStore } from '../model';
import { IFailure, IFailuresReply } from './api';
import { LiveSource } from './source';
import { nodeName } from './taskstream';

export class FailuresSource extends LiveSource<IFailuresReply> {
  constructor(store: ClusterStore) {
    super(store, 'failures', 'the failures', 3000);
  }

  failures: IFailure[] = [];
  truncated = false;

  protected query(): Record<string, number> {
    return { limit: 100 };
  }

  protected reset(): void {
    this.failures = [];
    this.truncated = false;
  }

  protected ingest(reply: IFailuresReply): void {
    this.failures = [...reply.failures].sort(
      (a, b) => (b.end ?? 0) - (a.end ?? 0)
    );
    this.truncated = !!reply.truncated;
  }

  protected summary(): string {
    const n = this.failures.length;
    return n === 0
      ? 'no failed task'
      : `${this.truncated ? 'the latest ' : ''}${n} failed ${n === 1 ? 'task' : 'tasks'}`;
  }
}

export function FailuresView({
  source
}: {
  source: FailuresSource;
}): JSX.Element {
  if (!source.failures.length) {
    return <p className="eugo-Empty">No task has failed.</p>;
  }
  return (
    <table className="eugo-Failures">
      <thead>
        <tr>
          <th>When</th>
          <th>Function</th>
          <th>Node</th>
          <th>Error</th>
        </tr>
      </thead>
      <tbody>
        {source.failures.map(f => (
          <tr key={f.task_id} data-task-id={f.task_id}>
            <td>{f.end ? new Date(f.end * 1000).toLocaleTimeString() : '–'}</td>
            <td>
              <code>{f.func}</code>
            </td>
            <td>{nodeName(f)}</td>
            <td className="eugo-Failures-error">
              <details>
                <summary>{f.error}</summary>
                <pre className="eugo-Failures-traceback">
                  {f.traceback || 'Ray kept no traceback for this task.'}
                </pre>
              </details>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
