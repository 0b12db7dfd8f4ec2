// The live panes' commands: each opens (or brings forward) one dock-able pane following the
// active cluster; a WidgetTracker per pane lets the layout restorer reopen them.
import { ILayoutRestorer, JupyterFrontEnd } from '@jupyterlab/application';
import { ICommandPalette, WidgetTracker } from '@jupyterlab/apputils';
import { DockLayout } from '@lumino/widgets';
import * as React from 'react';

import { CommandIDs } from '../commands';
import { ClusterStore } from '../model';
import { ILiveReply } from './api';
import { FailuresSource, FailuresView } from './failures';
import { GpusSource, GpusView } from './gpus';
import { NodesSource, NodesView } from './nodes';
import { LivePane } from './pane';
import { ProgressSource, ProgressView } from './progress';
import { LiveSource } from './source';
import { TaskStreamSource, TaskStreamView } from './taskstream';

interface IPaneKind {
  kind: string;
  command: string;
  label: string;
  caption: string;
  make: (store: ClusterStore) => LivePane<LiveSource<ILiveReply>>;
}

function pane<S extends LiveSource<ILiveReply>>(
  source: S,
  kind: string,
  label: string,
  View: (props: { source: S }) => JSX.Element
): LivePane<LiveSource<ILiveReply>> {
  return new LivePane<S>(source, kind, label, s =>
    React.createElement(View, { source: s })
  ) as unknown as LivePane<LiveSource<ILiveReply>>;
}

/** The panes, in the order of the card's buttons. */
export const PANES: IPaneKind[] = [
  {
    kind: 'tasks',
    command: CommandIDs.openTaskStream,
    label: 'Task Stream',
    caption: 'Every task per worker over the last minutes, live',
    make: store =>
      pane(new TaskStreamSource(store), 'tasks', 'Task Stream', TaskStreamView)
  },
  {
    kind: 'progress',
    command: CommandIDs.openProgress,
    label: 'Progress',
    caption: 'Done, running, waiting and failed per function, map and cell',
    make: store =>
      pane(new ProgressSource(store), 'progress', 'Progress', ProgressView)
  },
  {
    kind: 'nodes',
    command: CommandIDs.openNodes,
    label: 'Nodes',
    caption: 'CPU, memory and object store of every node, with history',
    make: store => pane(new NodesSource(store), 'nodes', 'Nodes', NodesView)
  },
  {
    kind: 'gpus',
    command: CommandIDs.openGpus,
    label: 'GPUs',
    caption: 'Utilization and memory of every GPU of every node',
    make: store => pane(new GpusSource(store), 'gpus', 'GPUs', GpusView)
  },
  {
    kind: 'failures',
    command: CommandIDs.openFailures,
    label: 'Failures',
    caption: 'Failed tasks with their error, traceback, node and function',
    make: store =>
      pane(new FailuresSource(store), 'failures', 'Failures', FailuresView)
  }
];

export function addLiveCommands(
  app: JupyterFrontEnd,
  store: ClusterStore,
  restorer: ILayoutRestorer | null,
  palette: ICommandPalette | null,
  category: string
): void {
  const open: LivePane<LiveSource<ILiveReply>>[] = [];
  for (const spec of PANES) {
    const tracker = new WidgetTracker<LivePane<LiveSource<ILiveReply>>>({
      namespace: `eugo-live-${spec.kind}`
    });
    app.commands.addCommand(spec.command, {
      label: `Open ${spec.label} (EugoHPC)`,
      caption: `${spec.caption}; follows the active cluster`,
      execute: args => {
        const existing = tracker.currentWidget;
        if (existing && !existing.isDisposed) {
          app.shell.activateById(existing.id);
          return existing;
        }
        const widget = spec.make(store);
        void tracker.add(widget);
        // The second pane opens beside the first, so both are in sight; later ones join the
        // last as tabs. The user re-docks them at will.
        const shown = open.filter(w => !w.isDisposed && w.isAttached);
        const ref = shown.length === 1 ? shown[0] : shown[shown.length - 1];
        const mode =
          (args?.mode as DockLayout.InsertMode | undefined) ??
          (shown.length === 1 ? 'split-right' : 'tab-after');
        app.shell.add(widget, 'main', {
          mode,
          ref: ref?.id,
          activate: args?.activate !== false
        });
        open.push(widget);
        widget.disposed.connect(() => open.splice(open.indexOf(widget), 1));
        return widget;
      }
    });
    palette?.addItem({ command: spec.command, category });
    void restorer?.restore(tracker, {
      command: spec.command,
      args: () => ({ activate: false }),
      name: () => spec.kind
    });
  }
}
