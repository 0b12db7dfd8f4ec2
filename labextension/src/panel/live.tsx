// The card's row of live-pane buttons: the panes follow the active cluster, so the row is on
// the active cluster's card; another card says how to get it.
import { CommandRegistry } from '@lumino/commands';
import * as React from 'react';

import { ICluster } from '../api';
import { CommandIDs } from '../commands';

const BUTTONS: [string, string][] = [
  [CommandIDs.openTaskStream, 'Task stream'],
  [CommandIDs.openProgress, 'Progress'],
  [CommandIDs.openNodes, 'Nodes'],
  [CommandIDs.openGpus, 'GPUs'],
  [CommandIDs.openFailures, 'Failures']
];

export function LiveButtons({
  cluster,
  commands
}: {
  cluster: ICluster;
  commands: CommandRegistry;
}): JSX.Element {
  if (!cluster.active) {
    return (
      <p className="eugo-LiveButtons-hint">
        Live panes (task stream, progress, nodes, GPUs, failures) follow the
        active cluster: make this one active to watch it.
      </p>
    );
  }
  return (
    <div
      className="eugo-LiveButtons"
      role="group"
      aria-label="Open a live pane"
    >
      <span className="eugo-Card-key">Live</span>
      {BUTTONS.map(([command, label]) => (
        <button
          key={command}
          type="button"
          className="jp-Button jp-mod-styled eugo-Action eugo-LiveButton"
          data-command={command}
          title={commands.caption(command) || undefined}
          onClick={() => void commands.execute(command)}
        >
          {label}
        </button>
      ))}
    </div>
  );
}
