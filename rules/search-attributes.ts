/**
 * The search attributes every move keeps current, so the Temporal UI (and `rebalancer moves`) can find and
 * filter moves. The dev server registers them at start; a production namespace needs them created once
 * (docs/production.md, "Search attributes").
 */
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

export const PartitionKey = defineSearchAttributeKey('RebalancePartition', SearchAttributeType.KEYWORD);
export const KindKey = defineSearchAttributeKey('RebalanceKind', SearchAttributeType.KEYWORD);
export const PhaseKey = defineSearchAttributeKey('RebalancePhase', SearchAttributeType.KEYWORD);
export const SourceKey = defineSearchAttributeKey('RebalanceSource', SearchAttributeType.KEYWORD);
export const TargetKey = defineSearchAttributeKey('RebalanceTarget', SearchAttributeType.KEYWORD);
/** When the phase shown in RebalancePhase began: finds moves that have waited in one phase too long. */
export const PhaseSinceKey = defineSearchAttributeKey('RebalancePhaseSince', SearchAttributeType.DATETIME);

export const SEARCH_ATTRIBUTES = [PartitionKey, KindKey, PhaseKey, SourceKey, TargetKey, PhaseSinceKey] as const;

