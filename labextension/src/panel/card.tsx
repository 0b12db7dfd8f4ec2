// One cluster's card: status, address, resource bars, waiting banner, nodes, tasks and actions.
import { launchIcon } from '@jupyterlab/ui-components';
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { dashboardHref, ICluster, ITaskCounts } from '../api';
import { CommandIDs } from '../commands';
import { BatchJobs } from './jobs';
import { FindingsSection } from './findings';
import { LiveButtons } from './live';
import {
  formatBytes,
  NodeTable,
  ResourceBar,
  usage,
  WaitingBanner
} from './resources';
import { ClusterExtras } from './ssh';

interface ICardProps {
  cluster: ICluster;
  busy: boolean;
  commands: CommandRegistry;
}

const STATUS_TEXT: Record<string, string> = {
  starting: 'Starting',
  running: 'Running',
  stopping: 'Stopping',
  stopped: 'Stopped',
  error: 'Error'
};

type CountKey = 'pending' | 'running' | 'finished' | 'failed';

/** The sentence under the counts when Ray let records go: each count is then a floor. */
function droppedNote(dropped: number): string {
  const records =
    dropped === 1
      ? 'the record of 1 older task'
      : `the records of ${dropped.toLocaleString()} older tasks`;
  return (
    `Ray let go of ${records} (it keeps only a limited number), ` +
    'so each count is at least the number shown: more tasks may have run.'
  );
}

function TaskCounts({ tasks }: { tasks: ITaskCounts }): JSX.Element {
  const entries: [CountKey, string][] = [
    ['pending', 'pending'],
    ['running', 'running'],
    ['finished', 'finished'],
    ['failed', 'failed']
  ];
  const dropped = tasks.dropped ?? 0;
  const atLeast = dropped > 0;
  return (
    <div className="eugo-TaskCounts">
      <dl
        className={`eugo-Tasks ${atLeast ? 'eugo-mod-atleast' : ''}`}
        aria-label="Tasks"
      >
        {entries.map(([key, label]) => {
          const shown = (tasks[key] ?? 0).toLocaleString();
          return (
            <div
              key={key}
              className={`eugo-Tasks-item eugo-mod-${key} ${tasks[key] > 0 ? 'eugo-mod-nonzero' : ''}`}
              data-state={key}
            >
              <dt>{label}</dt>
              <dd aria-label={atLeast ? `at least ${shown}` : undefined}>
                {atLeast ? `≥ ${shown}` : shown}
              </dd>
            </div>
          );
        })}
      </dl>
      {atLeast && (
        <p className="eugo-Tasks-dropped" role="note">
          {droppedNote(dropped)}
        </p>
      )}
    </div>
  );
}

interface IActionProps {
  commands: CommandRegistry;
  command: string;
  id: string;
  label: string;
  className?: string;
  disabled?: boolean;
}

function Action({
  commands,
  command,
  id,
  label,
  className,
  disabled
}: IActionProps) {
  const enabled = !disabled && commands.isEnabled(command, { id });
  return (
    <button
      type="button"
      className={`jp-Button jp-mod-styled eugo-Action ${className ?? ''}`}
      disabled={!enabled}
      title={commands.caption(command, { id }) || undefined}
      onClick={() => void commands.execute(command, { id })}
    >
      {label}
    </button>
  );
}

export function ClusterCard({
  cluster,
  busy,
  commands
}: ICardProps): JSX.Element {
  const cpu = usage(cluster, 'CPU');
  const gpu = usage(cluster, 'GPU');
  const memory = usage(cluster, 'memory');
  const href = dashboardHref(cluster);
  const alive = cluster.nodes.filter(n => n.alive).length;
  const live = cluster.status === 'running' || cluster.status === 'starting';
  const classes = ['eugo-Card', `eugo-mod-${cluster.status}`];
  if (cluster.active) {
    classes.push('eugo-mod-active');
  }
  return (
    <article
      className={classes.join(' ')}
      data-cluster-id={cluster.id}
      data-status={cluster.status}
      aria-label={`Cluster ${cluster.name}`}
    >
      <header className="eugo-Card-header">
        <h4 className="eugo-Card-name" title={cluster.name}>
          {cluster.name}
        </h4>
        <span
          className={`eugo-Status eugo-mod-${cluster.status}`}
          aria-label="Status"
        >
          {cluster.status === 'starting' || cluster.status === 'stopping' ? (
            <span className="eugo-Spinner" />
          ) : (
            <span className="eugo-Dot" />
          )}
          {STATUS_TEXT[cluster.status] ?? cluster.status}
        </span>
      </header>
      <div className="eugo-Card-meta">
        <span className="eugo-Tag">
          {cluster.kind === 'connect' ? 'connected' : (cluster.kind as string)}
        </span>
        {cluster.active && (
          <span
            className="eugo-Tag eugo-mod-active"
            title="New kernels use this cluster"
          >
            active
          </span>
        )}
        {cluster.lifetime === 'persistent' && (
          <span
            className="eugo-Tag"
            title="Keeps running when the Jupyter server stops"
          >
            persistent
          </span>
        )}
      </div>
      <div className="eugo-Card-address">
        <span className="eugo-Card-key">Address</span>
        <code title="Pass to eugo.hpc.init(address=...)">
          {cluster.address ?? '–'}
        </code>
      </div>
      {cluster.error && (
        <div
          className={`eugo-Notice ${cluster.status === 'error' ? 'eugo-mod-error' : 'eugo-mod-warn'}`}
          role="alert"
        >
          {cluster.error}
        </div>
      )}
      <WaitingBanner waiting={cluster.waiting} />
      <BatchJobs cluster={cluster} busy={busy} commands={commands} />
      <ClusterExtras cluster={cluster} commands={commands} />
      {live && (
        <>
          <div className="eugo-Bars">
            <ResourceBar label="CPU" used={cpu.used} total={cpu.total} />
            <ResourceBar label="GPU" used={gpu.used} total={gpu.total} />
            {memory.total > 0 && (
              <ResourceBar
                label="Mem"
                used={memory.used}
                total={memory.total}
                format={formatBytes}
              />
            )}
          </div>
          <details className="eugo-Card-nodes" open>
            <summary>
              Nodes <span className="eugo-Count">{alive}</span>
              {alive !== cluster.nodes.length && (
                <span className="eugo-Count eugo-mod-error">
                  {cluster.nodes.length - alive} dead
                </span>
              )}
            </summary>
            <NodeTable nodes={cluster.nodes} />
          </details>
          <TaskCounts tasks={cluster.tasks} />
          <LiveButtons cluster={cluster} commands={commands} />
        </>
      )}
      <FindingsSection runs={cluster.findings} />
      <footer className="eugo-Card-actions">
        {!cluster.active && live && (
          <Action
            commands={commands}
            command={CommandIDs.activate}
            id={cluster.id}
            label="Make active"
            disabled={busy}
          />
        )}
        <Action
          commands={commands}
          command={CommandIDs.insertCode}
          id={cluster.id}
          label="Insert code"
          disabled={!cluster.address}
        />
        {href && (
          <a
            className="jp-Button jp-mod-styled eugo-Action eugo-Link"
            href={href}
            target="_blank"
            rel="noopener noreferrer"
            title="Open the Ray dashboard in a new tab"
          >
            Dashboard
            <launchIcon.react tag="span" className="eugo-Link-icon" />
          </a>
        )}
        <Action
          commands={commands}
          command={CommandIDs.shutdown}
          id={cluster.id}
          label={
            cluster.kind === 'connect'
              ? 'Detach'
              : cluster.status === 'stopped'
                ? 'Remove'
                : 'Shut down'
          }
          className="eugo-mod-danger"
          disabled={busy || cluster.status === 'stopping'}
        />
      </footer>
    </article>
  );
}
