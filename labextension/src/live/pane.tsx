// The dock-able main-area widget every live pane is: a status line and the pane's body.
import { ReactWidget, UseSignal } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { eugoIcon } from '../icon';
import { ILiveReply } from './api';
import { LiveSource } from './source';

export class LivePane<S extends LiveSource<ILiveReply>> extends ReactWidget {
  constructor(
    readonly source: S,
    readonly kind: string,
    label: string,
    private readonly _body: (source: S) => JSX.Element
  ) {
    super();
    this.id = `eugo-live-${kind}`;
    this.addClass('eugo-Live');
    this.addClass(`eugo-Live-${kind}`);
    this.title.label = label;
    this.title.caption = `${label} of the active cluster (EugoHPC)`;
    this.title.icon = eugoIcon;
    this.title.closable = true;
  }

  dispose(): void {
    this.source.dispose();
    super.dispose();
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.source.setVisible(this.isVisible);
  }

  protected onBeforeDetach(msg: Message): void {
    this.source.setVisible(false);
    super.onBeforeDetach(msg);
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.source.setVisible(true);
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.source.setVisible(false);
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.source.changed} initialSender={this.source}>
        {() => (
          <>
            <p
              className={`eugo-Live-status eugo-mod-${this.source.status.state}`}
              data-state={this.source.status.state}
              role="status"
              title={this.source.status.text}
            >
              {this.source.status.text}
            </p>
            {this.source.status.state !== 'idle' && (
              // After a failed read the last data stays, dimmed, under the line saying so.
              <div
                className={`eugo-Live-body ${this.source.status.state === 'error' ? 'eugo-mod-stale' : ''}`}
              >
                {this._body(this.source)}
              </div>
            )}
          </>
        )}
      </UseSignal>
    );
  }
}
